"""labgrid parts of rtlab: strategies and drivers registered with labgrid's
target factory, imported by the env files in env/ (``imports:``)."""
