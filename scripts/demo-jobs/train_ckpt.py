"""A checkpointable training loop of STEPS steps of half a second: a
checkpoint every 4 steps (and one more on SIGTERM, the agent's checkpoint
signal) into TARMAC_CHECKPOINT_DIR; a later attempt resumes from
TARMAC_RESUME_DIR (docs/fencing.md).  Each checkpoint is a file of its own
named by the file `latest`, renamed into place, and COMPLETE is written
once after the first: a process killed in the middle of a save leaves the
previous checkpoint whole.  (A real job would fsync before each rename, to
survive the machine's crash too.)"""
import json
import os
import signal
import sys
import time

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 40
ckpt = os.environ.get("TARMAC_CHECKPOINT_DIR")
resume = os.environ.get("TARMAC_RESUME_DIR")
attempt = os.environ.get("TARMAC_ATTEMPT", "?")
step, loss = 0, 4.0
if resume:
    with open(os.path.join(resume, "latest")) as f:
        name = f.read().strip()
    with open(os.path.join(resume, name)) as f:
        saved = json.load(f)
    step, loss = saved["step"], saved["loss"]
    print("train: attempt %s resumed from the checkpoint at step %d (loss %.3f) in %s"
          % (attempt, step, loss, resume), flush=True)
else:
    print("train: attempt %s starts at step 0, no checkpoint to resume from" % attempt, flush=True)


def save(why):
    if not ckpt:
        return
    # the checkpoint signal waits until this checkpoint is whole
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    name = "step-%06d.json" % step

    def put(path, text):
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.rename(path + ".tmp", path)

    put(os.path.join(ckpt, name), json.dumps({"step": step, "loss": loss}))
    put(os.path.join(ckpt, "latest"), name + "\n")
    if not os.path.exists(os.path.join(ckpt, "COMPLETE")):
        put(os.path.join(ckpt, "COMPLETE"), "ok\n")
    print("train: checkpoint at step %d (%s)" % (step, why), flush=True)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def on_term(signum, frame):
    save("checkpoint signal")
    print("train: stopping at step %d, to resume elsewhere" % step, flush=True)
    sys.exit(0)


signal.signal(signal.SIGTERM, on_term)
while step < steps:
    time.sleep(0.5)
    step += 1
    loss *= 0.95
    if step % 4 == 0:
        save("every 4 steps")
print("train: attempt %s finished all %d steps, loss %.3f" % (attempt, steps, loss), flush=True)
