-- wrk script of bench/run.sh: a realistic non-streaming chat completion
-- (system prompt, a short exchange, a question; a 100-word answer), sent
-- with the bench virtual key. The bare hop forwards the key unchanged; the
-- simulated upstream accepts any key.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. (os.getenv("BENCH_KEY") or "missing-BENCH_KEY")
wrk.body = [[{"model":"bench","max_tokens":100,"temperature":0.2,"messages":[{"role":"system","content":"You are a concise assistant for a travel agency. Answer in plain prose, without lists, and mention prices only when asked."},{"role":"user","content":"We are two adults with a dog, arriving by train on Friday evening."},{"role":"assistant","content":"Noted: two adults and a dog, arriving Friday evening by train. What kind of weekend would you like?"},{"role":"user","content":"Suggest a quiet weekend itinerary near a river, with one museum, one long walk and a dog-friendly restaurant."}]}]]

-- PACE_MS (bench/run.sh's PACE) holds each connection this many
-- milliseconds before each request: with N connections a proxy gets about
-- N × 1000 / (PACE_MS + latency) requests a second whatever its speed, so
-- proxies of different speeds can be compared at one rate.
local pace = tonumber(os.getenv("PACE_MS") or "0")
if pace > 0 then
	function delay()
		return pace
	end
end
