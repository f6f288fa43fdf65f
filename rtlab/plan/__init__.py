"""What a run covers and what it is held to: campaigns, budgets and the regression policy."""
