-- raise.lua: make every token minted for one resource from now on greater than a mark
-- (storage's high-water mark from a stale-token refusal). Prepended with internal/epoch's lib.lua
-- and linger.lua.
-- KEYS[1] lease key <ns>:lease:{<resource>} = "<token> <deadline_us> <owner>"
-- ARGV[1] mark (decimal uint64 below 2^64 - 1)
-- ARGV[2] the caller's fencing epoch, '' when the key is to stay (see linger): a raised key
--         lingers out like a released one, as long past the mark's time
-- Reply: 1 when the key was raised to the mark, 0 when its token was already at or above it.
-- A live lease whose token is below the mark ends (storage refuses that token anyway): its
-- renew reports it superseded, and the next acquire mints above the mark.
local mark = u64_norm(ARGV[1])
local v = redis.call('GET', KEYS[1])
if v then
  local htok = string.match(v, '^(%d+) ')
  if htok and u64_cmp(u64_norm(htok), mark) >= 0 then return 0 end
end
redis.call('SET', KEYS[1], mark .. ' 0 ')
linger(KEYS[1], mark, ARGV[2])
return 1
