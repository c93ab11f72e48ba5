--[[
  A no-op membership change in a rebuild window stamps the state it answered.
]]
--@include append-event
--@include rebuild-window
-- A change that changes nothing answers from a state the rebuild read from
-- PostgreSQL, which may lack an older change of this user still in flight. In the
-- window, the state just answered is stamped as the user's newest change: the
-- late change can then undo it neither in Redis (the record supersedes it) nor in
-- PostgreSQL (the appended change outranks it).
local function confirmAfterRebuild(counters, outbox, touched, targetType, targetId, user, state, relationTag)
  if inRebuildWindow(counters) then
    local epoch, micros = appendEvent(counters, outbox, targetType, targetId, user, state, relationTag)
    noteChange(touched, user, epoch, micros)
  end
end
