"""The virtual rack: N QEMU boards wired like real ones, behind labgrid's
remote infrastructure (`rtlab rack up|down|status`).

    labgrid/rack.yaml, places.yaml, exporter.yaml   what the rack is
    rtlab.rack.pdu        HTTP PDU (labgrid simplerest/rest shapes) -> board power
    rtlab.rack.board      a virtual board: QEMU + U-Boot ROM, UART relay (pty), TFTP dir
    rtlab.rack.service    the daemon: coordinator, exporter, PDU, boards, stale-lock reaper
    rtlab.rack.state      the running rack's state file, for clients
"""
