"""What every service shares: the error shape, the app factory, health and metrics."""
