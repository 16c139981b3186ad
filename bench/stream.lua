-- wrk script of bench/run.sh with STREAM=1: a streamed chat completion
-- (system prompt and a question) asking for usage, as SDKs do; the answer
-- is $STREAM_TOKENS words (16 by default), so 20 events: the role, the
-- words, the finish, the usage and [DONE], each spaced by the upstream's
-- chunk delay. wrk counts a request when the stream has ended.
local tokens = tonumber(os.getenv("STREAM_TOKENS") or "16")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. (os.getenv("BENCH_KEY") or "missing-BENCH_KEY")
wrk.body = [[{"model":"bench","stream":true,"stream_options":{"include_usage":true},"max_tokens":]] .. tokens ..
	[[,"messages":[{"role":"system","content":"You are a concise assistant for a travel agency."},{"role":"user","content":"Suggest a quiet weekend itinerary near a river, with one museum and one long walk."}]}]]
