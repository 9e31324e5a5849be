"""Scripts shipped to a host and run by its target python with torch: each prints JSON lines."""
