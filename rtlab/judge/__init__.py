"""A measurement against its budget: the gate, and the evidence kept at the breach."""
