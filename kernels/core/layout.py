"""Index layout of the driver's small bookkeeping arrays (compile-time constants in Numba).

``ictl`` (int64, read-only control), ``fctl`` (float64, read-only control), ``info`` (int64,
counters and status, persisted), ``acc`` (float64 accumulators, persisted), ``sio`` (float64
step input/output scratch). ``red`` holds one reduction code per observation column.
"""

from __future__ import annotations

# ---- ictl: integer control
C_ADAPTIVE = 0  # 1: variable step with the controller; 0: fixed step h
C_HAS_DENSE = 1  # adaptive: 1 if the method has dense output (else steps are clipped to sample times)
C_N_OUT = 2  # number of output intervals (samples 0..n_out)
C_STRIDE = 3  # fixed step: steps per output interval
C_SNAP_EVERY = 4  # output intervals between snapshots (>= 1)
C_MAX_STEPS = 5  # adaptive: limit on trial steps (status NONCONVERGED beyond)
C_N_CHECK = 6  # length of the state prefix that is snapshotted and checked for finiteness
C_HAS_ENERGY = 7  # 1 if observation column 0 is the total energy
C_N_STEPS = 8  # fixed step: total steps (>= n_out·stride; samples stop at n_out)
C_HOLD = 9  # adaptive with dense output: 1 = stop before the step clipped to T (the driver sets 2 when it stops there)
C_START_ORDER = 10  # adaptive: the method's order when its step answers the starting-step modes (S_MODE); else 0
N_ICTL = 11

# ---- fctl: float control
F_H = 0  # fixed step h; adaptive: first trial step (<= 0: the starting-step rule of the driver)
F_TOL = 1  # adaptive: tolerance on the error estimate
F_THETA = 2  # controller safety factor θ
F_ALPHA = 3  # controller exponent α: h ← θ (tol/e)^α h
F_FAC_MIN = 4
F_FAC_MAX = 5
F_H_MIN = 6  # adaptive: smallest step before status NONCONVERGED
F_BLOWUP = 7  # stop with ENERGY_BLOWUP when |E − E0| > blowup·|E0| (<= 0 disables)
F_DT_OUT = 8  # output interval
N_FCTL = 9

# ---- info: persisted integer state
I_INIT = 0  # 1 once the initial state has been observed
I_STATUS = 1
I_K = 2  # accepted steps so far
I_FAIL_STEP = 3  # number (from 1) of the failing step; 0 = invalid initial state; −1 none
I_FAIL_INDEX = 4  # offending body, −1 if none
I_REJECTED = 5  # rejected trial steps (adaptive)
I_NSAMP = 6  # samples written so far (next row of ``out``)
I_EVALS = 7  # evaluations of the system's force / gradient / vector field (the step counts)
I_ITERS = 8  # nonlinear solver iterations, total (implicit steps)
I_ITERS_MAX = 9  # max solver iterations in one step
I_EXTRA = 10  # a family-specific counter (e.g. neighbour-list builds)
I_NSNAP = 11  # snapshots written so far
N_INFO = 12

# ---- acc: persisted float accumulators
A_E0 = 0
A_SUM_ABS = 1  # Σ_k |E_k − E0| over every accepted step and k = 0
A_MAX_ABS = 2
A_ST = 3  # Σ t_k, Σ t_k², Σ ΔE_k, Σ t_k ΔE_k (least-squares drift slope)
A_STT = 4
A_SE = 5
A_STE = 6
A_FAIL_VALUE = 7
A_T = 8  # time of the current (last valid) state
A_H = 9  # adaptive: next trial step (controller state)
A_HMIN = 10  # smallest / largest accepted step
A_HMAX = 11
A_ERRMAX = 12  # largest accepted error estimate (adaptive)
A_NFREJ = 13  # adaptive: consecutive trial steps rejected as non-finite (a count, stored as float)
A_OBS = 16  # per observation column j: [A_OBS+3j] sum, [+1] max/first, [+2] initial value (or last)
N_ACC_FIXED = A_OBS

# ---- sio: per-step scratch shared with the step function
S_FAIL_INDEX = 0  # the step writes the offending body here on failure (as a float)
S_FAIL_VALUE = 1  # … and the offending value
S_ERR = 2  # adaptive: the step's error estimate
S_MODE = 3  # what the driver asks of ``step`` (MODE_*); 0 except during the starting-step rule
N_SIO = 4

# ---- step modes (sio[S_MODE]) of a stepper that declares a starting-step order (C_START_ORDER)
MODE_STEP = 0  # one step of the method (the only mode of every other call)
MODE_RATE = 1  # Sn ← the vector field f(S) in the coordinates of the error estimate, zero-padded; sio[S_ERR] ← ‖y‖₂
MODE_EULER = 2  # Sn ← the state after one explicit Euler step of size h (Lie methods: one exponential action)

# ---- reductions over every accepted step (codes in ``red``)
R_NONE = 0  # sampled only
R_MAX = 1  # running max (slot +1)
R_MEANMAX = 2  # running sum (slot +0) and max (slot +1)
R_DEV = 3  # max |x − x0| (slot +1)
R_DEVNORM3 = 4  # max ‖x[j:j+3] − x0[j:j+3]‖₂ (slot +1 of column j)
R_WHENPOS = 5  # first (slot +0) and last (slot +1) time with x > 0 (NaN if never)


def env_offset(n_obs: int) -> int:
    """Start of the running envelope of the current output interval in ``acc``: min ΔE, max ΔE,
    then the max of each observation column (columns with a MAX or MEANMAX reduction)."""
    return A_OBS + 3 * n_obs


def acc_size(n_obs: int) -> int:
    return env_offset(n_obs) + 2 + n_obs
