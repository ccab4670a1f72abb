"""What the replay's outputs become once per run: the state every frame and output table reads."""
