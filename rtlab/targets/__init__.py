"""What measures run on: architectures, boards (labgrid env files) and kernel variants."""
