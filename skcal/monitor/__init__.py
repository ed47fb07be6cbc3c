"""Sequential calibration monitoring: an anytime-valid test of a deployed calibrator."""

from ._monitor import CalibrationMonitor, MonitorVerdict

__all__ = ["CalibrationMonitor", "MonitorVerdict"]
