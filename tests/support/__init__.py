"""What the test modules share: config writers, kb on fake models, the CLI runner, the
index's rows, stub servers, daemons run in a test, and runs as an unprivileged user."""
