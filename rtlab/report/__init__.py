"""Showing results: the comparison table, the vendor reports, plots, JUnit XML and the system snapshot every job keeps."""
