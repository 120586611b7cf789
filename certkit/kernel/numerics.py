"""The kernel's second face, re-exports only: what producers borrow to choose (a VERIFIED comes only from check)."""
from .check import kind_and_claim
from .fp import U, ETA, gamma, inflate, sum_up, arb_of, arb_up, arb_down, arb_to_fraction_lower, arb_to_fraction_upper
from .fp import exp_nonpos, EXP_REL, EXP_ABS
from .load import MAX_FILE, read_json, read_regular, instance, make_instance, array, FORMAT, parse_numeral, exact_float
from .rows import Decoder, enclose_all, indices
from .rule_chain import enclosures as chain_enclosures, read_witness as chain_witness, chain, geometry as chain_geometry
from .rule_lattice import lattice_count, theta_sum
from .rule_lower import singular_value_bounds
from .rule_upper import max_row_distance, max_row_error, output_rows
