-- lead.lua: a reconciler leader raises the queue's reconciler high-water to
-- its token, so a deposed leader is refused on this queue from now on, even
-- before the new leader's first decision here.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 reconciler leader token
-- Reply: 1 when the token is current; -1 when a newer leader was seen.
if reconciler_ok(ARGV[2]) then return 1 end
return -1
