"""The sessions that wait on something outside (a job, a CI run, a rollout, a page, a log) and
the operations cycles, as Scripts: polls whose answers move and polls whose answers do not."""

from __future__ import annotations

import json

from script import C, Script


def ops_aab_cycle() -> Script:
    """Check, check again, restart — and the pod crash-loops the same way every time."""
    s = Script("ops-aab", "2026-03-05T02:11:30")
    s.user("PagerDuty: checkout-api is down in prod-eu. Get it healthy again.")
    status = json.dumps({"deployment": "checkout-api", "namespace": "prod-eu", "ready": "0/3",
                         "pods": [{"name": "checkout-api-7d9f6c", "status": "CrashLoopBackOff",
                                   "restarts": 14,
                                   "last_error": "FATAL: password authentication failed for "
                                                 "user \"checkout\""}]})
    s.calls(C("get_deployment_events", {"deployment": "checkout-api", "namespace": "prod-eu",
                                        "limit": 5},
              "Back-off restarting failed container checkout-api in pod checkout-api-7d9f6c"),
            text="Checking recent events for checkout-api.")
    for _ in range(4):
        s.calls(C("get_deployment_status", {"deployment": "checkout-api", "namespace": "prod-eu"},
                  status), text="Checking the rollout status.")
        s.calls(C("get_deployment_status", {"deployment": "checkout-api", "namespace": "prod-eu"},
                  status), text="Still not ready; checking once more before restarting.")
        s.calls(C("restart_deployment", {"deployment": "checkout-api", "namespace": "prod-eu"},
                  "deployment.apps/checkout-api restarted"),
                text="Restarting the deployment.")
    s.say("checkout-api keeps crash-looping: the pods fail with `password authentication failed "
          "for user \"checkout\"`. Restarting will not fix it — the database credential in the "
          "`checkout-db` secret looks rotated. I need someone with access to the secret to "
          "update it.")
    return s


def codex_backfill_watch() -> Script:
    """Status, logs, status, logs — while the job moves: a cycle in shape, progress in fact."""
    s = Script("codex-backfill", "2025-08-14T16:02:00")
    s.user("Start the invoice backfill job in billing and watch it until it completes.")
    k = ["bash", "-lc"]
    s.calls(C("shell", {"command": k + ["kubectl apply -f deploy/jobs/backfill-invoices.yaml"],
                        "workdir": "/home/ana/billing"},
              "job.batch/backfill-invoices created"), text="Starting the backfill job")
    status = {"command": k + ["kubectl get job backfill-invoices -n billing --no-headers"],
              "workdir": "/home/ana/billing"}
    logs = {"command": k + ["kubectl logs job/backfill-invoices -n billing --tail=2"],
            "workdir": "/home/ana/billing"}
    for n in range(5):
        age = f"{1 + 2 * n}m{(17 * n) % 60:02d}s"
        s.calls(C("shell", status, f"backfill-invoices   0/1   {age}   {age}"),
                text="Checking the job status")
        s.calls(C("shell", logs, f"batch {40 * n + 39}/200 written (invoices 2019-0{n + 1})\n"
                                 f"batch {40 * n + 40}/200 written (invoices 2019-0{n + 1})"),
                text="Reading the latest log lines")
    s.calls(C("shell", status, "backfill-invoices   1/1   11m02s   11m40s"),
            text="Checking the job status")
    s.say("The backfill finished: 200/200 batches written, job `backfill-invoices` completed "
          "in about 11 minutes.")
    return s


def gemini_ci_poll() -> Script:
    """A read-only poll whose answer moves every time: progress, not a loop."""
    s = Script("gemini-ci-poll", "2026-03-08T08:30:00")
    s.user("I pushed the release branch. Watch the CI run and tell me when it's green.")
    s.calls(C("list_workflow_runs", {"owner": "tidewater", "repo": "pgmeter",
                                     "branch": "release/2.3", "per_page": 1},
              json.dumps({"workflow_runs": [{"id": 8841230057, "name": "CI",
                                             "status": "queued", "head_sha": "5e0c2a1"}]})),
            text="Finding the CI run for release/2.3.")
    steps = ["checkout", "setup-python", "lint", "typecheck", "unit (3.11)", "unit (3.12)",
             "integration (pg15)", "integration (pg16)", "build wheel", "docs"]
    for n in range(22):
        done = min(n // 2, len(steps))
        status = "completed" if done == len(steps) else "in_progress"
        ans = {"id": 8841230057, "status": status, "conclusion": "success" if
               status == "completed" else None, "jobs_completed": f"{done}/{len(steps)}",
               "current_step": steps[done] if done < len(steps) else None,
               "elapsed": f"{2 + n * 25 // 60}m{(n * 25) % 60:02d}s"}
        s.calls(C("get_workflow_run", {"owner": "tidewater", "repo": "pgmeter",
                                       "run_id": 8841230057}, json.dumps(ans)),
                text="Checking the CI run again.")
    s.say("CI run 8841230057 on release/2.3 is green: all 10 jobs passed in about 11 minutes.")
    return s


def otel_rollout_poll() -> Script:
    """A quiet poll: the same rollout-status call, the same 'waiting' answer, 7 times."""
    s = Script("otel-rollout-poll", "2026-03-09T14:02:00")
    s.user("Roll out api v2.8.1 to staging and tell me when it's healthy.")
    s.calls(C("kubectl", {"args": ["set", "image", "deployment/api", "api=registry.tidewater.io/api:2.8.1",
                                   "-n", "staging"]}, "deployment.apps/api image updated"),
            text="Updating the image.")
    waiting = ('Waiting for deployment "api" rollout to finish: 1 of 3 updated replicas are available...')
    for _ in range(7):
        s.calls(C("kubectl", {"args": ["rollout", "status", "deployment/api", "-n", "staging", "--timeout=30s"]},
                  waiting + "\nerror: timed out waiting for the condition", error=True),
                text="Checking the rollout.")
    s.user("Stop polling. Why is it stuck?")
    s.calls(C("kubectl", {"args": ["describe", "pod", "-l", "app=api", "-n", "staging"]},
              "Events:\n  Warning  FailedScheduling  0/4 nodes are available: 4 Insufficient memory."),
            text="Looking at the pods.")
    s.say("Two new pods can't be scheduled: the staging nodes are out of memory. Scale a node "
          "group or lower the memory request.")
    return s


def gemini_rewound() -> Script:
    """What the user rewound away: it must not reach the ledger."""
    s = Script("gemini-ci-rewound", "2026-03-08T08:29:00")
    s.user("Delete the old release branches.")
    for _ in range(3):
        s.calls(C("run_shell_command", {"command": "git push origin --delete release/2.1"},
                  "error: unable to delete 'release/2.1': remote ref does not exist",
                  error=True), text="Deleting release/2.1.")
    return s


def gemini_quiet_poll() -> Script:
    s = Script("gemini-quiet", "2026-02-20T17:05:00")
    s.user("The nightly export job is running; read logs/export.log and tell me when it "
           "finishes.")
    log = ("2026-02-20 17:01:12 INFO export started (tenant=all, format=parquet)\n"
           "2026-02-20 17:01:40 INFO wrote part-0000.parquet (412 MB)\n"
           "2026-02-20 17:02:05 INFO compacting partitions…")
    for _ in range(18):
        s.calls(C("read_file", {"absolute_path": "/srv/exporter/logs/export.log"}, log),
                text="Reading the export log.")
    s.say("The export log hasn't changed for a while: the last line is still \"compacting "
          "partitions…\" from 17:02:05. The job may be stuck in compaction; check the exporter "
          "process.")
    return s


def browser_navigate_poll() -> Script:
    """A costly poll: each page load differs (queue position), yet a browser run has a ceiling."""
    s = Script("browser-queue", "2026-03-09T07:59:30")
    s.user("Get me two tickets for the Lumen Arcade show on April 12 at the Vaultline box office "
           "site. Max 80 EUR each.")
    s.calls(C("browser_navigate", {"url": "https://tickets.vaultline.example/events/lumen-arcade"},
              "Page: Lumen Arcade — Vaultline\n- heading \"Lumen Arcade — Apr 12, 20:00\"\n"
              "- button \"Buy tickets\" [ref=e14]"), text="Opening the event page.")
    s.calls(C("browser_click", {"element": "Buy tickets button", "ref": "e14"},
              "Page: Waiting room — Vaultline\n- text \"You are in line. Position: 2,814\""),
            text="Clicking Buy tickets.")
    for n in range(20):
        pos = 2814 - 131 * (n + 1)
        s.calls(C("browser_navigate", {"url": "https://tickets.vaultline.example/queue"},
                  f"Page: Waiting room — Vaultline\n- text \"You are in line. Position: "
                  f"{pos:,}\"\n- text \"Estimated wait: {max(1, pos // 140)} min\""),
                text="Reloading the waiting room to check my position.")
    s.say("I'm still in the Vaultline waiting room (position about 194). Reloading the page "
          "every few seconds doesn't move me forward faster; I'll stop here so you can keep "
          "the tab open yourself.")
    return s


def export_quiet_poll() -> Script:
    """A background command polled with BashOutput: the same 'running' answer, over and over."""
    s = Script("export-poll", "2026-03-09T09:14:02")
    s.user("the staging deploy is stuck, watch it until it finishes")
    s.calls(C("Bash", {"command": "./scripts/deploy-status.sh --follow staging", "run_in_background": True,
                       "description": "Follow the staging deploy"},
              "Command running in background with ID: 7c41e2"),
            text="I'll follow the deploy in the background and poll it.")
    for _ in range(9):
        s.calls(C("BashOutput", {"bash_id": "7c41e2"},
                  "<status>running</status>\n\n<stdout>\nwaiting for rollout: 1 of 3 pods updated\n</stdout>"))
    s.calls(C("Bash", {"command": "kubectl -n staging get pods -l app=api"},
              "NAME                   READY   STATUS             RESTARTS\napi-6d9f7c9b8-k2x4q   0/1     ImagePullBackOff   0"),
            C("Bash", {"command": "kubectl -n staging get events --sort-by=.lastTimestamp | tail -5"},
              "Failed to pull image \"registry.example.invalid/api:9f3c\": not found", error=True),
            text="Still 1 of 3 pods. Checking the pods and the events in parallel:")
    s.say("The rollout is stuck: the new pod cannot pull `registry.example.invalid/api:9f3c` "
          "(ImagePullBackOff). The image tag in the deploy does not exist in the registry.")
    return s
