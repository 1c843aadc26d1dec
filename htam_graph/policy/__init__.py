"""The policy: turns the memory's scores into a choice (softmax over tau, seeded draws)."""
