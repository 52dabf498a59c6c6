"""GPU backends: what runs the timing pass and the counter pass on real hardware (or replays them)."""
