// Package record checks what one replay visit recorded against its own
// sample table and the replay's configuration: the rules replay's drive
// (internal/visit) follows when it takes the samples, stated so that a
// record that breaks one of them was edited, not measured. It depends on
// nothing but the record, its rows and the configuration, so both the
// audit and replay's --resume (for each visit it reloads from its journal)
// can apply it.
//
// # Visit
//
// [Visit] holds exactly, for every passed visit: the visit's threads and
// sets are the configuration's; its sample table's rows belong to it, are
// of known kinds and come in the order replay takes them (config.samples
// empty samples, config.samples batch samples of callsPerSample calls
// each, config.singles single calls, then config.samples novel samples,
// then, on a GPU under config.graphBatch, the graph samples);
// callsPerSample is what calibration can choose (a power of two up to
// [MaxCalls]); and the novel record is what replay's drive writes: its
// calls are [visit.NovelCalls] of the batch samples' calls and the
// visit's novel slots (freshSets), and its checked calls are
// [visit.ChecksPerSample] of each sample, in increasing order.
//
// # Calibration
//
// [Calibration] relates the batch samples to config.sampleMs. Replay
// doubles the calls of a calibration sample from 1 until one lasts
// sampleMs (or the calls reach [MaxCalls]), taking a sample that jumped
// there again (visit.CalibrateCalls); the batch samples repeat that many
// calls. One visit's batch samples prove little: a calibration sample
// preempted for a few milliseconds stops the doubling early, and load
// during the batch stretches every sample. So the rule holds over the
// replay's passed visits (at least [MinCalibrated]), on the median visit,
// within a factor [CalibrationSlack]. warmupMs leaves no trace in any
// sample (the warm-up's samples are not kept) and is not checked.
package record
