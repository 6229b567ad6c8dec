// kb's page: the answer streamed in as it is written, the status kept fresh. Text from the
// server is only ever set as text; HTML comes only in the `done` event, rendered (escaped) by
// the server's templates.
"use strict";

function streamAnswer(section) {
  const url = section.dataset.events;
  if (!url) return;
  const target = section.querySelector("[data-answer]");
  const events = new EventSource(url);
  let started = false;
  events.addEventListener("text", (event) => {
    if (!started) {
      target.textContent = "";
      started = true;
    }
    target.append(document.createTextNode(JSON.parse(event.data)));
  });
  events.addEventListener("done", (event) => {
    events.close();
    const done = JSON.parse(event.data);
    section.innerHTML = done.html;
    section.classList.add("done");
  });
  events.addEventListener("failure", (event) => {
    events.close();
    const line = document.createElement("p");
    line.className = "error";
    line.setAttribute("role", "alert");
    line.textContent = JSON.parse(event.data);
    section.replaceChildren(line);
  });
  events.onerror = () => {
    // The server went away mid-answer: say so once, rather than reconnecting and asking again.
    if (section.classList.contains("done")) return;
    events.close();
    const line = document.createElement("p");
    line.className = "error";
    line.textContent = "The connection to kb was lost before the answer was complete.";
    section.append(line);
  };
}

function keepFresh(section) {
  const url = section.dataset.refresh;
  const refresh = async () => {
    try {
      const response = await fetch(url, { headers: { Accept: "text/html" } });
      if (response.ok) section.innerHTML = await response.text();
    } catch (_) {
      // The server is restarting: the next round tries again.
    }
  };
  setInterval(refresh, 2000);
}

function backLinks() {
  for (const link of document.querySelectorAll("[data-back]")) {
    link.addEventListener("click", (event) => {
      event.preventDefault();
      history.back();
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  for (const section of document.querySelectorAll("[data-events]")) streamAnswer(section);
  for (const section of document.querySelectorAll("[data-refresh]")) keepFresh(section);
  backLinks();
});
