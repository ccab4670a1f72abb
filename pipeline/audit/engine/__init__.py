"""The plans of one audit run, in order, from the replay to the output tables."""
