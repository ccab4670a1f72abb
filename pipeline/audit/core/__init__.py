"""The audit engine's core: what every rule and frame is built from."""
