"""What the chat model is asked and what it writes back, checked: every prompt and its
version (`prompts`), answers cleaned and rejected with honest fallbacks (`outputs`)."""
