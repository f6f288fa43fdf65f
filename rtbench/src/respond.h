#ifndef RB_RESPOND_H
#define RB_RESPOND_H

/* `rtbench respond ...`: the board side of the interrupt-response test */
int rb_respond_main(int argc, char **argv);

#endif
