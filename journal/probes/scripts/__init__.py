"""Scripts shipped to a host and run there by the target env's python (standard library only)."""
