package web

import "time"

// SetAnswerTime sets how long the lot lets an answer's writing take.
func (l *ParkingLot) SetAnswerTime(d time.Duration) { l.answerTime = d }
