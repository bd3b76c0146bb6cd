#!/usr/bin/env bash
# `make run`: serves the example repository at once; the chat model, whose
# training takes minutes, trains in the background and joins when it is done.
#
# The server runs in poll mode (rescans every 5 s): the chat model is written
# to a folder beside the repository and moved in whole when its training
# ends, so the next rescan loads it (a half-written model is never seen).
# Ctrl-C stops the server and an unfinished training; the next `make run`
# trains again.
#   scripts/run_examples.sh REPOSITORY INFERD_BINARY
set -euo pipefail
repo=$1
inferd=$2
py=/usr/bin/python3
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -d "$repo/license_chat" ]; then
  staging=$(mktemp -d "$(dirname "$repo")/.chat-training.XXXXXX")
  log="$(dirname "$repo")/chat-training.log"
  echo "run: training license_chat in the background (about 10-20 minutes on 2 cores; log: $log);" \
       "the other models serve now, the chat model joins when its training is done"
  (
    # The base model, then its LoRA adapter (license_files, about two minutes more), moved in together.
    if nice -n 10 "$py" "$here/make_chat_model.py" "$staging" > "$log" 2>&1 &&
       nice -n 10 "$py" "$here/make_chat_lora.py" "$staging" >> "$log" 2>&1; then
      mv "$staging/license_chat" "$repo/license_chat" && echo "run: license_chat trained; the server loads it within 5 s"
    else
      echo "run: training license_chat failed; see $log"
    fi
    rm -rf "$staging"
  ) &
fi
exec "$inferd" serve --model-repository "$repo" --model-control-mode poll --repository-poll-secs 5
