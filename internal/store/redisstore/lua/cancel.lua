-- cancel: a waiter gave up. Dequeue its ticket; release a lease it was
-- granted meanwhile with a zero outcome. Either may let the next waiter in.
-- ARGV: ticket, wake prefix. Returns {dequeued (0/1), released (0/1)}.
local now = now_ms()
local ticket, prefix = ARGV[1], ARGV[2]
wake_all(reap(now), now, prefix)
local dq, rel = 0, 0
if leave(ticket, now, prefix) then
  dq = 1
end
if live_lease(ticket, now) then
  rel = 1
  local l = drop_lease(ticket)
  if l then
    local hs = lease_holds(l)
    for i = 2, #hs do
      wake(hs[i][1], now, prefix)
    end
    if not apply(l, now, false, 0, false) then
      wake(l[1], now, prefix)
    end
  end
end
return {dq, rel}
