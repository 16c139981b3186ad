-- cancel: a waiter gave up. Dequeue its ticket; release a lease it was
-- granted meanwhile with a zero outcome. Either may let the next waiter in.
-- ARGV: ticket, wake prefix. Returns {dequeued (0/1), released (0/1)}.
local now = now_ms()
local ticket, prefix = ARGV[1], ARGV[2]
wake_all(reap(now), now, prefix)
local dq, rel = 0, 0
local r = dequeue(ticket)
if r then
  dq = 1
  -- It may have been the head that barred the others from a free unit.
  local budget = 8
  for u in string.gmatch(r[4], '[^\30]+') do
    wake(u, now, prefix, 1)
    budget = budget - 1
    if budget == 0 then
      break
    end
  end
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
