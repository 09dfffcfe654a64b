"""archsim.pim"""
