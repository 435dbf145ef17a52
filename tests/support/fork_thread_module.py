"""Starts a thread when imported: a fork server that loads it must refuse to fork."""

import threading
import time

threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
