-- claim.lua: bind an operation id to the resource a write of it is about to go to, so that the
-- operation applies on one resource only (an operation id names one effect across the store).
-- KEYS[1] index  <ns>:fence:opindex:{<op id>}    string: the resource the operation id is bound to
-- KEYS[2] claims <ns>:fence:opclaims:{<op id>}   integer: writes of the operation on that resource
--                                                that are in flight or applied
-- ARGV[1] resource
-- ARGV[2] TTL of both keys in ms (0: keep forever)
-- Reply: {1, resource}      bound to ARGV[1] (now or before): the write may go ahead; claims + 1
--        {0, other}         bound to another resource: the write must not go ahead; nothing changed
--        error 'FENCEDQ <reason>'   a key holds what the store does not write there: nothing changed
--        Redis's own error when it refuses the write (READONLY on a replica, such as a primary
--        a failover demoted; NOREPLICAS; OOM): nothing changed, and nothing is wrong with the data
-- The claim is counted before the binding is written: INCR is the call that can fail.
local cur = redis.pcall('GET', KEYS[1])
if type(cur) == 'table' and cur.err then
  return redis.error_reply('FENCEDQ store key ' .. KEYS[1] .. ' is not a string')
end
if cur and cur ~= ARGV[1] then
  return {0, cur}
end
local n = redis.pcall('INCR', KEYS[2])
if type(n) == 'table' and n.err then
  -- WRONGTYPE, or ERR for a value that is no integer: the data; anything
  -- else is Redis refusing the write, passed on as it is
  if string.sub(n.err, 1, 10) ~= 'WRONGTYPE ' and string.sub(n.err, 1, 4) ~= 'ERR ' then return n end
  return redis.error_reply('FENCEDQ store key ' .. KEYS[2] .. ' is not an integer')
end
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
else
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('PERSIST', KEYS[2])
end
return {1, ARGV[1]}
