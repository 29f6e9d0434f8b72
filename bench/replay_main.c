/*
 * bench/replay_main.c: `tarmac_replay ARGS` runs `tarmac replay ARGS`, so
 * the bench script works whether or not controller/main.c dispatches the
 * subcommand yet.
 */
#include "controller/cli/cli.h"
#include "controller/replay/replay.h"

int main(int argc, char **argv)
{
    argv[0] = "replay";
    return tm_replay_main(argc, argv);
}
