"""Board-side pytest files: `rtlab run` runs them on a board through
labgrid's pytest plugin (rtlab.run.runner); they are not host tests."""
