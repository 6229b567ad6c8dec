"""`kb daemon`: the process that keeps the index in step with the vaults (`daemon`), the
file watcher that tells it what changed (`watcher`), and the socket through which it
answers `kb query` (`query_socket`)."""
