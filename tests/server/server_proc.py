"""Starting llm-server for the tests in this folder.

  proc, port, stderr_lines = start(server_bin, ["-m", model, ...])

Runs the server with --port 0 and reads the port from its "listening on"
line (exits the test when it does not start within `timeout` seconds);
stderr is collected into `stderr_lines` (a list that keeps growing) unless
the caller passes stderr=None to let it through.
"""
import subprocess
import sys
import threading


def start(server_bin, args, timeout=120, stderr=subprocess.PIPE):
    proc = subprocess.Popen([server_bin, "--port", "0"] + list(args), stdout=subprocess.PIPE, stderr=stderr, text=True)
    line = [None]
    t = threading.Thread(target=lambda: line.__setitem__(0, proc.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    if not line[0] or "listening on http://" not in line[0]:
        proc.kill()
        sys.exit("server did not start: %r" % line[0])
    port = int(line[0].split("listening on http://")[1].split()[0].rsplit(":", 1)[1])
    stderr_lines = []
    if stderr == subprocess.PIPE:
        threading.Thread(target=lambda: [stderr_lines.append(l) for l in proc.stderr], daemon=True).start()
    return proc, port, stderr_lines


def stop(proc, timeout=30):
    """SIGTERM, then SIGKILL after `timeout` s; True when it stopped by itself."""
    if proc.poll() is not None:
        return True
    proc.terminate()
    try:
        proc.wait(timeout)
        return True
    except subprocess.TimeoutExpired:
        proc.kill()
        return False
