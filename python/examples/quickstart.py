# Routes a short multi-turn chat through kvroute's cache_aware policy: each
# turn goes to the worker that served the conversation so far (cache_hit).
import kvroute

router = kvroute.Router(policy="cache_aware", workers=[
    "http://10.0.0.1:30000", "http://10.0.0.2:30000", "http://10.0.0.3:30000"])

chats = {"alice": "You are a helpful assistant.\nalice: What is a KV cache?",
         "bob": "You are a terse assistant.\nbob: Define prefill, please."}
for turn in range(2):
    for user, history in chats.items():
        s = router.select(history, headers={"x-smg-routing-key": user})
        if not s:  # no worker is a value, not an exception
            raise SystemExit(f"no worker: {s.branch}")
        with router.dispatch(s):  # the worker's load lasts as long as the block
            print(f"turn {turn} {user:<5} -> {s.url} ({s.branch})")
        chats[user] = history + f"\nassistant: ...\n{user}: Tell me more."

try:
    kvroute.Router(policy="cache_aware", cache_threshold=2)
except ValueError as e:
    print(e)  # cache_threshold (--cache-threshold): 2 is outside [0, 1]
