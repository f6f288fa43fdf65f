"""Running a campaign on the lab: the runner, a job's life on the host, the warm board-test process and the one results path."""
