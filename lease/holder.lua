-- holder.lua: read the live lease on one resource.
-- KEYS[1] lease key <ns>:lease:{<resource>} = "<token> <deadline_us> <owner>"
-- KEYS[2] the namespace's epoch record <ns>:epoch, which keeps its time (epoch_now;
--         on Redis Cluster the resource's own <ns>:lease:{<resource>}:clock; absent, plain
--         TIME, when epochs are off)
-- Reply: {owner, token, deadline_us} of a live lease, or {} when free.
local now = epoch_now(KEYS[2], nil, true) -- a read: writes nothing
local v = redis.call('GET', KEYS[1])
if not v then return {} end
local htok, hdl, howner = string.match(v, '^(%d+) (%d+) (.*)$')
if not hdl or tonumber(hdl) <= now then return {} end
return {howner, htok, hdl}
