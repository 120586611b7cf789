"""Real pretrained heads (untrusted): offline loading with transformers, Q/K extraction by hooks,
the reconstruction check against the model's own attention probabilities."""
