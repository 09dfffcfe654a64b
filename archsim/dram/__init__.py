"""archsim.dram"""
