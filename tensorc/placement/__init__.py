"""Where blocks live and where tasks go: the placement model the planner and the runtime share."""
