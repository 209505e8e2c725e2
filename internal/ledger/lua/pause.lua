-- pause.lua: an operator pauses or resumes the queue. Claims skip a paused
-- queue; running attempts go on; enqueues are still accepted.
-- KEYS, ARGV 1: the ledger layout (see prelude.lua).
-- ARGV 2 'pause', 'resume' or 'unpause'   3 actor   4 note
--      5 pause: the pause's id ('' none); resume: the id of the pause the
--        caller saw ('' any pause; '-' a pause recorded without an id);
--        unpause: the id of the pause to take back
-- Reply: 1 when the queue's state changed, 0 when it already was so, -1 when
--   a resume found the queue paused by another pause than the one seen
--   (nothing changed).
-- unpause takes back a pause of id ARGV[5] its caller just made (a change
-- that failed after it): the pause and its event (the newest, when it is
-- still that pause's, by actor ARGV[3]) are removed, no resume recorded.
queue_guard({'events'})
local changed
local id = ARGV[5] or ''
if ARGV[2] == 'unpause' then
  local cur = redis.call('GET', pausedk)
  if not cur then return 0 end
  local ok, rec = pcall(cjson.decode, cur)
  if not ok or type(rec) ~= 'table' or rec.id ~= id or id == '' then return -1 end
  redis.call('DEL', pausedk)
  local top = redis.call('LINDEX', eventsk, 0)
  if top then
    local eok, ev = pcall(cjson.decode, top)
    if eok and type(ev) == 'table' and ev.type == 'pause' and ev.actor == ARGV[3] then
      redis.call('LPOP', eventsk)
    end
  end
  return 1
end
if ARGV[2] == 'pause' then
  local rec = {actor = ARGV[3], note = ARGV[4], at = fmt(now)}
  if id ~= '' then rec.id = id end
  changed = redis.call('SET', pausedk, cjson.encode(rec), 'NX')
  changed = changed and 1 or 0
else
  if id ~= '' then
    local cur = redis.call('GET', pausedk)
    if cur then
      local ok, rec = pcall(cjson.decode, cur)
      local want = id
      if want == '-' then want = nil end
      if not ok or type(rec) ~= 'table' or rec.id ~= want then return -1 end
    end
  end
  changed = redis.call('DEL', pausedk)
  if changed == 1 then redis.call('SET', idlek, '1'); wake() end
end
if changed == 1 then event({type = ARGV[2], actor = ARGV[3], note = ARGV[4]}) end
return changed
