"""Evaluation: score a seeded synthetic model for about SECONDS."""
import os
import random
import sys
import time

secs = float(sys.argv[1]) if len(sys.argv) > 1 else 10
job = os.environ.get("TARMAC_JOB_ID", "?")
rng = random.Random(int(job) if job.isdigit() else 0)
end = time.time() + secs
right = total = 0
while time.time() < end:
    for _ in range(2000):
        x = rng.random()
        right += (x > 0.2) == (rng.random() > 0.25)
        total += 1
    time.sleep(0.2)
print("evaluate: job %s on GPU %s: accuracy %.3f over %d examples"
      % (job, os.environ.get("CUDA_VISIBLE_DEVICES", "-"), right / max(total, 1), total), flush=True)
