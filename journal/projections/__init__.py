"""Pure folds from events to the views the CLI and the web UI show."""
