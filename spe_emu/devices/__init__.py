"""Models of firmware and board services that are not memory-mapped registers (PSCI)."""
