"""Long runs: the checkpoints a soak keeps while it measures, and the probabilistic worst case (extreme value fit) over their block maxima."""
