"""Toy FedAvg app whose aggregate has a closed form (see `task.expected_global`)."""
