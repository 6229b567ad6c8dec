FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
COPY migrations ./migrations
RUN pip install --no-cache-dir . && useradd --create-home kb
USER kb
ENTRYPOINT ["kb"]
